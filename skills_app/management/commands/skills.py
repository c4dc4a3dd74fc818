"""`manage.py skills list|validate|catalog|render|import`: inspect the skills Skillscope would load,
and install uploaded skills from the command line."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from skills_app.core.lint import STRICT_RULES
from skills_app.core.registry import SkillRegistry, discover
from skills_app.core.render import render_skill
from skills_app.core.skillfile import Problem, SkillSpec, find_skill_file, lint_skill_dir
from skills_app.registry import uploads
from skills_app.registry.skills import current_catalog, get_registry, registry_for_dirs

CLI_SESSION_ID = "cli"


def _problem_json(p: Problem) -> dict[str, Any]:
    return {"rule": p.rule, "message": p.message, "file": p.file, "line": p.line}


class Command(BaseCommand):
    help = "List, validate, catalog and render skills."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="subcommand", required=True, metavar="{list,validate,catalog,render,import}"
        )

        def dirs_option(p: Any) -> None:
            p.add_argument(
                "--dir",
                action="append",
                default=[],
                dest="dirs",
                metavar="DIR",
                help="scan this folder instead of the configured ones (repeatable; earlier wins)",
            )

        p = sub.add_parser("list", help="every discovered skill, with its problems")
        dirs_option(p)
        p.add_argument("--json", action="store_true", help="print a JSON array")
        p = sub.add_parser(
            "validate", help="lint a skill folder or a folder of skills; exit 1 on errors"
        )
        p.add_argument("path")
        p.add_argument(
            "--strict",
            action="store_true",
            help="also exit 1 on the warnings where a skill breaks the Agent Skills spec "
            f"({', '.join(sorted(STRICT_RULES))})",
        )
        p = sub.add_parser("catalog", help="print the exact catalog text the model sees")
        dirs_option(p)
        p.add_argument(
            "--budget", type=int, default=None, help="character budget (default: setting)"
        )
        p = sub.add_parser("render", help="print the hidden message a skill would inject")
        p.add_argument("name")
        p.add_argument(
            "skill_args", nargs="*", metavar="ARGS", help="arguments as typed after /NAME"
        )
        dirs_option(p)
        p = sub.add_parser(
            "import",
            help="install a skill (folder, .zip or .skill), a plugin, or a folder of skills",
        )
        p.add_argument("path")
        p.add_argument("--user", default=None, help="the uploader (owner with --personal)")
        p.add_argument(
            "--personal", action="store_true", help="install as the user's personal skill"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['subcommand']}")(options)

    def _registry(self, options: dict[str, Any]) -> SkillRegistry:
        dirs = options.get("dirs") or []
        return registry_for_dirs([Path(d) for d in dirs]) if dirs else get_registry()

    # --- list ------------------------------------------------------------------------------

    def _list(self, options: dict[str, Any]) -> None:
        registry = self._registry(options)
        winners = {s.name: s for s in registry.skills()}
        rows: list[dict[str, Any]] = []
        for spec in registry.candidates():
            winner = winners[spec.name]
            row = self._spec_row(spec)
            row["shadowed"] = winner is not spec
            row["shadowed_by"] = str(winner.path) if winner is not spec else None
            rows.append(row)
        for failure in registry.failures:
            rows.append(
                {
                    "name": failure.name,
                    "description": None,
                    "source": failure.source,
                    "path": str(failure.path),
                    "digest": None,
                    "loaded": False,
                    "model_invocable": False,
                    "user_invocable": False,
                    "errors": [_problem_json(failure.problem)],
                    "warnings": [],
                    "shadowed": False,
                    "shadowed_by": None,
                }
            )
        rows.sort(key=lambda r: (r["name"], r["shadowed"], r["path"]))
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        for row in rows:
            flags = [
                row["source"],
                "model" if row["model_invocable"] else "",
                "user" if row["user_invocable"] else "",
                f"shadowed by {row['shadowed_by']}" if row["shadowed"] else "",
                "NOT LOADED" if not row["loaded"] else "",
            ]
            self.stdout.write(f"{row['name']}  [{', '.join(f for f in flags if f)}]  {row['path']}")
            if row["description"]:
                self.stdout.write(f"    {' '.join(row['description'].split())[:100]}")
            for key in ("errors", "warnings"):
                for p in row[key]:
                    self.stdout.write(f"    {key[:-1]} [{p['rule']}] {p['message']}")
        for p in registry.source_problems:
            self.stderr.write(str(p))

    @staticmethod
    def _spec_row(spec: SkillSpec) -> dict[str, Any]:
        return {
            "name": spec.name,
            "description": spec.description,
            "when_to_use": spec.when_to_use,
            "source": spec.source,
            "path": str(spec.path),
            "skill_file": str(spec.skill_file),
            "digest": spec.digest,
            "loaded": True,
            "model_invocable": spec.model_invocable,
            "user_invocable": spec.user_invocable,
            "argument_hint": spec.argument_hint,
            "allowed_tools": list(spec.allowed_tools),
            "model": spec.model,
            "errors": [_problem_json(p) for p in spec.errors],
            "warnings": [_problem_json(p) for p in spec.warnings],
        }

    # --- validate --------------------------------------------------------------------------

    def _validate(self, options: dict[str, Any]) -> None:
        path = Path(options["path"]).absolute()
        if not path.is_dir():
            raise CommandError(f"{path} is not a folder; give a skill folder or a folder of skills")
        dirs = [path] if find_skill_file(path) else [Path(f.path) for f in discover(path)]
        if not dirs:
            raise CommandError(f"no SKILL.md found under {path}")
        errors = warnings = overshoots = 0
        for skill_dir in dirs:
            problems = lint_skill_dir(skill_dir)
            errors += sum(p.severity == "error" for p in problems)
            warnings += sum(p.severity == "warning" for p in problems)
            overshoots += sum(p.rule in STRICT_RULES for p in problems)
            status = (
                "ok"
                if not problems
                else "errors"
                if any(p.severity == "error" for p in problems)
                else "warnings"
            )
            self.stdout.write(f"{skill_dir}: {status}")
            for p in problems:
                self.stdout.write(f"  {p}")
        summary = f"{len(dirs)} skill(s) checked: {errors} error(s), {warnings} warning(s)"
        if errors:
            raise CommandError(summary)
        if options["strict"] and overshoots:
            raise CommandError(
                f"{summary}; --strict: {overshoots} of the warnings break a rule of the Agent "
                "Skills spec"
            )
        self.stdout.write(summary)

    # --- catalog / render ------------------------------------------------------------------

    def _catalog(self, options: dict[str, Any]) -> None:
        self.stdout.write(current_catalog(self._registry(options), budget=options["budget"]))

    def _render(self, options: dict[str, Any]) -> None:
        registry = self._registry(options)
        spec = registry.get(options["name"])
        if spec is None:
            names = ", ".join(s.name for s in registry.skills()) or "none"
            raise CommandError(f"no skill named {options['name']!r}; available: {names}")
        words = options["skill_args"]
        # One argument is passed through as typed; several are re-quoted so their split survives.
        args = words[0] if len(words) == 1 else shlex.join(words)
        self.stdout.write(render_skill(spec, args, session_id=CLI_SESSION_ID))

    # --- import ----------------------------------------------------------------------------

    def _import(self, options: dict[str, Any]) -> None:
        path = Path(options["path"]).absolute()
        user = None
        if options["user"]:
            try:
                user = get_user_model().objects.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['user']!r}") from None
        elif options["personal"]:
            raise CommandError("--personal needs --user NAME: the owner of the personal skill")
        installs: list[Callable[[], list[uploads.InstallResult]]]
        if path.is_file():
            installs = [
                partial(
                    uploads.install_archive,
                    path.read_bytes(),
                    path.name,
                    user=user,
                    personal=options["personal"],
                )
            ]
            label = [path]
        elif path.is_dir():
            folders = self._import_folders(path)
            label = folders
            installs = [
                partial(uploads.install_directory, f, user=user, personal=options["personal"])
                for f in folders
            ]
        else:
            raise CommandError(
                f"{path} does not exist; give a skill folder, a .zip or a .skill file"
            )
        failed = 0
        for where, install in zip(label, installs, strict=True):
            try:
                results = install()
            except uploads.UploadError as exc:
                failed += 1
                self.stderr.write(f"{where}: refused: {exc.message}")
                for p in exc.problems:
                    self.stderr.write(f"  {p}")
                continue
            for result in results:
                self.stdout.write(result.message)
                for p in result.warnings:
                    self.stdout.write(f"  {p}")
        if failed:
            raise CommandError(f"{failed} of {len(installs)} upload(s) refused")

    @staticmethod
    def _import_folders(path: Path) -> list[Path]:
        """The folder itself when it is a skill or a plugin, else each skill folder inside it."""
        if find_skill_file(path) or (path / "skills").is_dir():
            return [path]
        folders = sorted(p for p in path.iterdir() if p.is_dir() and find_skill_file(p))
        return folders or [path]
