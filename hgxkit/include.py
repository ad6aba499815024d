"""Include a deploy file that sits next to the one running, whatever pyinfra's loader is doing meanwhile.

pyinfra loads a deploy file for every host at once (one greenlet each) and keeps the file being run in one
global, ``state.current_exec_filename``, that each greenlet sets and restores. When host A finishes its file
while host B is still in the middle of its own (B was waiting on a fact), A puts back ``None`` and B's
``local.include("./sibling.py")`` resolves against the working directory instead of the deploy folder:
"No such file or directory: '…/bringup.py'" on one host of a multi-host run. An absolute path takes the
global out of the question.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import local


def sibling_path(this_file: str, name: str) -> str:
    """The absolute path of ``name`` in the folder of ``this_file`` (a deploy file's ``__file__``).

    >>> sibling_path("deploys/reproduce.py", "bringup.py").endswith("/deploys/bringup.py")
    True
    """
    return str(Path(this_file).resolve().with_name(name))


def include_sibling(this_file: str, name: str) -> None:
    """Run the deploy file ``name`` next to ``this_file``, as ``local.include`` does, by absolute path.

    include_sibling(__file__, "bringup.py")   # in deploys/reproduce.py
    """
    local.include(sibling_path(this_file, name))
