"""pyinfra roles: one folder each, with every knob in its `defaults.py`. Roles call hgxkit, never each other."""
