"""`manage.py mcp add|list|test|remove|review|reseal`: register MCP servers, review their tools,
encrypt their stored secrets again after a key rotation."""

from __future__ import annotations

import shlex
import textwrap
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from skills_app import trail
from skills_app.core.mcp import McpConnectError
from skills_app.core.mcp.oauth import SignInRequired
from skills_app.core.mcp.tool import with_grant
from skills_app.mcp import definitions, oauth_grants, servers
from skills_app.mcp.servers import McpSetupError
from skills_app.models import McpServer, McpToolDefinition

# The model field behind a shown part that is left out when empty.
PARTS = {"annotations": "annotations", "_meta": "meta"}


class Command(BaseCommand):
    help = "Register MCP servers, list their tools, review the definitions (docs/mcp.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="subcommand", required=True, metavar="{add,list,test,remove,review,reseal}"
        )
        p = sub.add_parser(
            "add",
            help="register a server: stdio with --argv or `-- PROGRAM ARGS`, http with --url",
        )
        p.add_argument("name", help="the server's part of its tools' names (mcp__NAME__tool)")
        p.add_argument("--as", dest="as_user", required=True, help="the admin registering it")
        p.add_argument("--argv", default="", help="a stdio server's command line (shell words)")
        p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
        p.add_argument("--read-only", action="append", default=[], metavar="FOLDER")
        p.add_argument("--url", default="", help="a Streamable HTTP server's address")
        p.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'")
        p.add_argument(
            "--oauth",
            action="store_true",
            help="an http server where each person signs in (OAuth 2.1) and calls it as themself",
        )
        p.add_argument("--group", action="append", default=[], help="a group that sees it")
        p.add_argument("--everyone", action="store_true", help="every signed-in person sees it")
        p.add_argument("--display-name", default="")
        sub.add_parser("list", help="every server, its env keys (never values) and tools")
        p = sub.add_parser("test", help="connect, list the tools and store their definitions")
        p.add_argument("name")
        p.add_argument(
            "--as", dest="as_user", default="", help="an OAuth server: whose sign-in to use"
        )
        p = sub.add_parser("remove", help="delete a server and its definitions")
        p.add_argument("name")
        p.add_argument("--as", dest="as_user", required=True)
        p = sub.add_parser("review", help="show, approve or reject pending tool definitions")
        p.add_argument("name")
        p.add_argument("--tool", default="", help="only this tool")
        p.add_argument(
            "--hash",
            dest="hashes",
            action="append",
            default=[],
            metavar="HASH",
            help=f"a definition as `mcp review NAME` showed it: its hash, or at least its first "
            f"{definitions.HASH_PREFIX_MIN} characters (required with --approve; repeatable)",
        )
        p.add_argument(
            "--attest-hints",
            action="store_true",
            help="with --approve: vouch for the readOnlyHint and destructiveHint of the "
            "definitions approved, as shown (a read-only tool then runs where no rule names it)",
        )
        verdict = p.add_mutually_exclusive_group()
        verdict.add_argument("--approve", action="store_true")
        verdict.add_argument("--reject", action="store_true")
        p.add_argument("--as", dest="as_user", default="", help="the reviewer")

        sub.add_parser(
            "reseal",
            help="encrypt stored env and header values and OAuth grants again under the current "
            "SECRET_KEY (after a rotation, before dropping the fallback keys)",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        """`mcp add NAME ... -- PROGRAM ARGS`: what follows `--` is the stdio server's argv."""
        if len(argv) > 2 and argv[2] == "add" and "--" in argv:
            at = argv.index("--")
            argv = [*argv[:at], "--argv", shlex.join(argv[at + 1 :])]
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['subcommand']}")(options)

    def _reseal(self, options: dict[str, Any]) -> None:
        try:
            count = servers.reseal_secrets()
        except McpSetupError as exc:
            raise CommandError(str(exc)) from None
        grants, unopened = oauth_grants.reseal_grants()
        self.stdout.write(
            f"Encrypted again under the current SECRET_KEY: the values of {count} servers and "
            f"{grants} OAuth grants."
        )
        if unopened:
            self.stdout.write(
                f"{unopened} OAuth grants open under no configured key and were left as they "
                "are: their people sign in again."
            )

    def _user(self, username: str) -> Any:
        model = get_user_model()
        try:
            return model.objects.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CommandError(f"There is no user {username!r}.") from None

    def _server(self, name: str) -> McpServer:
        server = McpServer.objects.filter(name=name).first()
        if server is None:
            known = ", ".join(McpServer.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No MCP server named {name!r}. Registered: {known}.")
        return server

    def _add(self, options: dict[str, Any]) -> None:
        user = self._user(options["as_user"])
        argv = shlex.split(options["argv"])
        try:
            server = servers.register(
                name=options["name"],
                kind="http" if options["url"] else "stdio",
                registered_by=user,
                argv=argv,
                env=servers.parse_pairs(options["env"], "=", "--env KEY=VALUE"),
                read_only_paths=options["read_only"],
                url=options["url"],
                headers=servers.parse_pairs(options["header"], ":", "--header 'Name: value'"),
                display_name=options["display_name"],
                groups=options["group"],
                everyone=options["everyone"],
                auth="oauth" if options["oauth"] else "",
            )
        except McpSetupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f'Registered "{server.name}" ({server.kind}). Next: `manage.py mcp test '
            f"{server.name}`, then another admin reviews its tools with `manage.py mcp review`."
        )

    def _list(self, options: dict[str, Any]) -> None:
        for server in McpServer.objects.prefetch_related("groups", "definitions"):
            where = " ".join(shlex.quote(a) for a in server.argv) if server.argv else server.url
            seen = ", ".join(sorted(g.name for g in server.groups.all()))
            audience = "everyone" if server.everyone else (seen or "nobody yet")
            kind = f"{server.kind}, oauth" if server.auth == "oauth" else server.kind
            self.stdout.write(f"{server.name} ({kind}{'' if server.enabled else ', off'})")
            self.stdout.write(f"  {where}")
            if server.env:
                self.stdout.write(f"  env keys: {', '.join(sorted(server.env))}")
            if server.headers:
                self.stdout.write(f"  headers: {', '.join(sorted(server.headers))}")
            self.stdout.write(f"  seen by: {audience}; registered by {server.registered_by_name}")
            for row in server.definitions.all():
                if row.current:
                    what = "prompt " if row.kind == McpToolDefinition.Kind.PROMPT else ""
                    self.stdout.write(f"  - {what}{row.tool} {row.content_hash[:12]} {row.status}")

    def _test(self, options: dict[str, Any]) -> None:
        server = self._server(options["name"])
        spec = None
        if server.auth == "oauth":
            if not options["as_user"]:
                raise CommandError(
                    f'"{server.name}" asks each person to sign in: say whose sign-in to use with '
                    "--as USERNAME (that person signs in first on the server's sign-in page, "
                    f"{oauth_grants.sign_in_link(server)})."
                )
            grants = oauth_grants.grants_for(self._user(options["as_user"]).pk, server)
            try:
                spec = with_grant(
                    servers.spec_for(server),
                    oauth_grants.load_grant(grants.user_id, server),
                    grants,
                )
            except SignInRequired:
                raise CommandError(
                    f'{options["as_user"]} has not signed in to "{server.name}": open '
                    f"{grants.sign_in_url} as them first."
                ) from None
        try:
            with trail.acting(name=trail.command_actor()):
                count, report = definitions.list_now(server, spec)
        except SignInRequired:
            raise CommandError(
                f'The sign-in to "{server.name}" no longer works: sign in again on its page.'
            ) from None
        except McpConnectError as exc:
            tail = f"\nIts stderr ended with:\n{exc.stderr_tail}" if exc.stderr_tail else ""
            raise CommandError(f"{exc}{tail}") from None
        self.stdout.write(f'"{server.name}" lists {count} tools.')
        for label, names in (
            ("new, waiting for review", report.new),
            ("changed, waiting for review (the approved one serves meanwhile)", report.changed),
            ("unchanged", report.unchanged),
        ):
            if names:
                self.stdout.write(f"  {label}: {', '.join(names)}")

    def _remove(self, options: dict[str, Any]) -> None:
        server = self._server(options["name"])
        servers.remove(server, actor=self._user(options["as_user"]))
        self.stdout.write(f'Removed "{options["name"]}".')

    def _review(self, options: dict[str, Any]) -> None:
        """Show what waits; approve exactly the definitions read (by hash); reject by tool too.

        Nobody approves what they cannot read: an approval names the hashes `mcp review NAME`
        showed, so a definition the server changed after the reviewer read it is not approved.
        """
        server = self._server(options["name"])
        again = f"read `manage.py mcp review {server.name}` again"
        if not (options["approve"] or options["reject"]):
            if options["hashes"]:
                raise CommandError("--hash goes with --approve or --reject.")
            self._show_pending(server, options["tool"])
            return
        if options["approve"] and not options["hashes"]:
            raise CommandError(
                "Say what you read: pass the hash of each definition to approve with --hash, "
                f"as shown by `manage.py mcp review {server.name}`."
            )
        if not options["as_user"]:
            raise CommandError("Say who reviews: --as USERNAME.")
        reviewer = self._user(options["as_user"])
        try:
            hashes = definitions.full_hashes(server, options["hashes"])
            done = definitions.review(
                server,
                approve=options["approve"],
                reviewer=reviewer,
                tool=options["tool"],
                content_hashes=hashes or None,
                exactly=True,
                attest=hashes if options["approve"] and options["attest_hints"] else (),
            )
        except definitions.StaleReview as exc:
            raise CommandError(
                f"Nothing was reviewed. {exc} The server's description of its tools may have "
                f"changed since you read it: {again} and pass the hashes it shows now."
            ) from None
        except McpSetupError as exc:
            raise CommandError(str(exc)) from None
        verb = "Approved" if options["approve"] else "Rejected"
        self.stdout.write(f"{verb}: {', '.join(done) or 'nothing was waiting'}.")

    def _show_pending(self, server: McpServer, tool: str) -> None:
        """Each pending definition whole (as the admin's review page shows it) with its hash."""
        rows = server.definitions.filter(
            status=McpToolDefinition.Status.PENDING, current=True
        ).order_by("tool")
        if tool:
            rows = rows.filter(tool=tool)
        if not rows:
            self.stdout.write("Nothing waits for review.")
            return
        approved = set(
            server.definitions.filter(status=McpToolDefinition.Status.APPROVED).values_list(
                "kind", "tool"
            )
        )
        for row in rows:
            if row.kind == McpToolDefinition.Kind.PROMPT:
                changed = "changed prompt: not offered until reviewed"
                state = changed if (row.kind, row.tool) in approved else "new prompt"
            elif (row.kind, row.tool) in approved:
                state = "changed: an approved definition serves meanwhile"
            else:
                state = "new"
            self.stdout.write(f"{row.tool} ({state})")
            self.stdout.write(f"  hash: {row.content_hash}")
            problem = definitions.unshowable(row)
            if problem:
                # Not printed: its characters could hide or reorder text on a terminal too.
                self.stdout.write(f"  Cannot be approved: {problem} It can be rejected.")
                continue
            for part, text in definitions.shown_text(row).items():
                if part in PARTS and not getattr(row, PARTS[part]):
                    continue
                self.stdout.write(f"  {part}:")
                self.stdout.write(textwrap.indent(text or "(empty)", "    ", lambda _line: True))
        self.stdout.write(
            f"Approve what you read: manage.py mcp review {server.name} --approve "
            "--hash HASH [--hash HASH ...] --as YOU"
        )
