"""KernelBand for coding agents: the tools ``kernelband mcp`` serves (list, check, profile,
optimize, and a kernel's stored results).

The logic lives here, free of the MCP SDK: ``workspace`` (which paths a tool may touch),
``jobs`` (engine jobs as subprocesses, the language server's job manager), ``reports``
(the compact answers) and ``tools`` (what each tool does). ``server`` is the thin MCP
layer over ``tools``; it is the only module that imports the SDK.

Nothing here imports torch or triton: every check, profile and optimization runs as
``python -m kernelband ...`` in its own process tree, killed on cancel.
"""
