"""Packaging hook: a wheel carries the dbt project (dbt_project.yml, models, macros, seeds, ...)
inside the package as recall_shim/project/, so an installed agent-memory builds without a
checkout (recall_shim/common/paths.py ``project_dir``). Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "snapshots", "tests",
                 "analyses", "demo")


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout itself
        root = Path(__file__).resolve().parent
        dest = Path(self.build_lib) / "recall_shim" / "project"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in PROJECT_FILES:
            src = root / name
            if src.is_dir():
                shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif src.is_file():
                shutil.copy2(src, dest / name)


setup(cmdclass={"build_py": BuildPyWithProject})
