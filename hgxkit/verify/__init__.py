"""Verify a serving node: the benchmark plan, the detached host script that runs the servers' own
benchmark client per cell, and the host fingerprint archived with every run.

    plan.py         cells (input length x concurrency x group), the client's arguments, results, gates
    script.py       the shell script the verify role runs on the host in a systemd transient unit
    fingerprint.py  everything that can change a result, read from the host through facts
"""
