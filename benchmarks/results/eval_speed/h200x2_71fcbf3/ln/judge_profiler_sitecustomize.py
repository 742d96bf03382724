"""Profiles the judge process (``python -m kernelband.worker``) when KB_PROFILE_DIR is set:
put this directory first on PYTHONPATH. How ``ln/judge_profile_tottime.txt`` was made."""
import os

_DIR = os.environ.get("KB_PROFILE_DIR")


def _start(out_dir: str) -> None:
    import atexit
    import cProfile
    import signal

    profile = cProfile.Profile()
    profile.enable()

    def dump(*_: object) -> None:
        profile.disable()
        os.makedirs(out_dir, exist_ok=True)
        profile.dump_stats(os.path.join(out_dir, f"judge-{os.getpid()}.prof"))

    def on_term(*_: object) -> None:
        dump()
        os._exit(0)

    atexit.register(dump)
    signal.signal(signal.SIGTERM, on_term)


if _DIR:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            _ARGV = f.read().split(b"\0")
    except OSError:
        _ARGV = []
    if b"kernelband.worker" in _ARGV:
        _start(_DIR)
