"""kernelband-lsp: the KernelBand language server (pygls 2, stdio).

Finds Triton kernels in open files, shows code lenses / hovers / symbols, and runs
KernelBand jobs (optimize, profile) as subprocesses. Never imports torch or triton.
"""

__version__ = "0.1.0"
