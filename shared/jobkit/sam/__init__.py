"""What ``sam build`` runs to build a jobkit stack from an app's repo.

``jobkit template`` writes, beside template.yaml, a small Makefile (see
:mod:`jobkit.sam.makefile`) that every runner function and the jobkit layer
name in their ``Metadata`` (``BuildMethod: makefile``, ``ContextPath``). SAM
runs it, and it runs ``python -m jobkit.sam`` with the Python that has jobkit
installed:

- :mod:`jobkit.sam.layer`: the jobkit layer, from the *installed* jobkit (a
  release, a local wheel or a source tree alike) and its runtime dependencies,
  cross-installed for the Lambda runtime and architecture;
- :mod:`jobkit.sam.runner`: a runner function's code, the app's own job
  package(s) and the requirements the declaration names.

pip cross-installs wheels (``--platform``, ``--python-version``), so the build
needs neither the runtime's Python version nor a container.
"""

from __future__ import annotations

from jobkit.core.resources import ARCHITECTURE, RUNTIME

#: The machine (``platform_machine``) of each Lambda architecture, and pip's platform tag for it.
MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}
PLATFORMS = {architecture: f"manylinux2014_{machine}" for architecture, machine in MACHINES.items()}


def pip_target_flags(architecture: str = ARCHITECTURE, runtime: str = RUNTIME) -> list[str]:
    """pip options that install wheels for the Lambda runtime, not for this machine."""
    python_version = runtime.removeprefix("python")
    return [
        "--platform",
        PLATFORMS[architecture],
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--only-binary=:all:",
    ]
