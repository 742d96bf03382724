"""The sandbox's layers and what ``sandbox.enter`` reports about them, and the names of
its settings. Standard library only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

LAYERS = ("user", "mount", "hide", "dev", "ipc", "pid", "network")
POLICY_ENV = "KERNELBAND_SANDBOX"  # best-effort (default) | strict
SKIP_ENV = "KERNELBAND_SANDBOX_SKIP"  # layers the judge leaves out on purpose, comma-separated
READ_ENV = "KERNELBAND_SANDBOX_READ"  # the user's paths the job reads (set by the judge), os.pathsep-separated
# "1": the Triton cache (outside the job's directory) is writable too: a sibling compiling into its job's cache
CACHE_WRITE_ENV = "KERNELBAND_SANDBOX_CACHE_WRITABLE"


@dataclass
class Layer:
    name: str
    state: str  # "held" | "partial" | "refused" | "skipped"
    detail: str


@dataclass
class SandboxReport:
    """What ``enter`` could do on this machine, one entry per layer (``LAYERS``)."""

    policy: str
    layers: list[Layer] = field(default_factory=list)

    def layer(self, name: str) -> Layer:
        return next(layer for layer in self.layers if layer.name == name)

    def set(self, name: str, state: str, detail: str) -> None:
        self.layers = [layer for layer in self.layers if layer.name != name] + [Layer(name, state, detail)]
        self.layers.sort(key=lambda layer: LAYERS.index(layer.name))

    @property
    def failed(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.state in ("refused", "partial")]

    @property
    def network(self) -> str:
        """The network layer in the words the judge reports (``isolated: ...`` or ``not isolated: ...``)."""
        net = self.layer("network")
        return f"isolated: {net.detail}" if net.state == "held" else f"not isolated: {net.detail}"

    def summary(self) -> str:
        return "; ".join(f"{layer.name} {layer.state}: {layer.detail}" for layer in self.layers)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class SandboxRefused(SystemExit):
    """A layer the OS refused under ``KERNELBAND_SANDBOX=strict``: the variant process
    exits (code 3) before any job code runs; the reason is on its stderr."""

    def __init__(self, message: str) -> None:
        super().__init__(3)
        self.message = message
