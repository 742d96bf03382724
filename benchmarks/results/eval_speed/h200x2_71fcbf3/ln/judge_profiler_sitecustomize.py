# profiles the judge process (python -m kernelband.worker) when KB_PROFILE_DIR is set
import os
_dir = os.environ.get("KB_PROFILE_DIR")
if _dir:
    try:
        _argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
    except OSError:
        _argv = []
    if b"kernelband.worker" in _argv:
        import atexit, cProfile, signal, sys
        _p = cProfile.Profile()
        _p.enable()
        def _dump(*_a):
            _p.disable()
            os.makedirs(_dir, exist_ok=True)
            _p.dump_stats(os.path.join(_dir, f"judge-{os.getpid()}.prof"))
        atexit.register(_dump)
        def _term(signum, frame):
            _dump(); os._exit(0)
        signal.signal(signal.SIGTERM, _term)
