"""scripts/need_modules.py: the scripts run with a Python that has their modules, whichever python3
comes first on PATH. A pyenv or virtualenv python3 often lacks numpy and torch while Debian's
/usr/bin/python3 has them (scripts/setup.sh installs them there); on the lent GPU machine it is the
other way round. tests/lib.sh picks its Python the same way.

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import need_modules
    need_modules.require("numpy", "torch")      # before importing them

When this interpreter cannot import one of them, the first of $PYTHON, each python3 on PATH and
/usr/bin/python3 that imports them all runs the script instead, with the same arguments (one note
on stderr names it). When none does, one line names what is missing and the script exits with
`status`: 1, or 77 for a check that should count as skipped.
"""
import importlib.util
import os
import shutil
import subprocess
import sys

_TRIED = "ZEROC_NEED_MODULES_TRIED"   # set for the re-run: never re-run twice


def _missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _candidates():
    # this interpreter is not left out: a python3 wrapper (a virtualenv, "python3 -S") may have run it
    # without the site directories that the same binary started plainly has
    seen, out = set(), []
    paths = [os.environ.get("PYTHON", "")]
    paths += [os.path.join(d, "python3") for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    paths.append("/usr/bin/python3")
    for p in paths:
        p = shutil.which(p) if p and not os.path.isabs(p) else p
        if p and os.path.isfile(p) and os.access(p, os.X_OK) and os.path.realpath(p) not in seen:
            seen.add(os.path.realpath(p))
            out.append(p)
    return out


def require(*modules, status=1):
    missing = _missing(modules)
    if not missing:
        return
    script = os.path.basename(sys.argv[0])
    if not os.environ.get(_TRIED):
        probe = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
        for py in _candidates():
            if subprocess.run([py, "-c", probe, *modules], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                print("note: %s: the Python that ran it (%s) cannot import %s; running it with %s" % (script, sys.executable, ", ".join(missing), py), file=sys.stderr)
                sys.stderr.flush()
                os.environ[_TRIED] = "1"
                os.execv(py, [py, *sys.argv])
    print("%s: %s needs the Python modules %s: %s lacks %s, and so do $PYTHON, the python3 on PATH and /usr/bin/python3 "
          "(bash scripts/setup.sh installs Debian's python3-numpy, python3-torch and python3-matplotlib)"
          % ("skip" if status == 77 else "error", script, ", ".join(modules), sys.executable, ", ".join(missing)), file=sys.stderr)
    sys.exit(status)
