"""The evaluation worker process and its client (see worker/main.py)."""
