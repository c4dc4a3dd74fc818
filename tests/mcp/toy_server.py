"""A small MCP server for the tests, written with the SDK's server class (MCPServer).

    python toy_server.py stdio [--description-file F] [--growable]
    python toy_server.py http --port N [--description-file F] [--oauth]

With `--oauth` the HTTP server is also its own OAuth 2.1 authorization server (the SDK's
`OAuthAuthorizationServerProvider` routes: metadata, dynamic registration, authorize, token) and
answers MCP requests only with a token it issued. Its authorize step approves at once (there is
no person on this side) and redirects back with the code, the state and its `iss` (RFC 9207);
its `whoami` tool answers with the client the token was issued to and the `resource` it names.

Its tools leave traces the tests read on the server's side: `touch_marker` writes a file in its
working directory (a stdio server's is the conversation's workspace; `note` goes into it),
`picture` answers with an image, an SVG and an embedded resource besides its text,
`read_text` answers with a file of that folder (or at an absolute path), `report_env` answers
with its whole environment (and can save it there too), `wait_marked` notes that it started and
whether it was cancelled, `crash` ends the process mid-call, `ask_colour` and `ask_password` ask the person for
input mid-call (`elicitation/create`) and answer with what the client said (and the colour given), the prompt
`brief` takes a required `topic` and an optional `tone` (and notes the topic in `briefs-asked`), and `quote_file` is a file's text. The description of `echo` is read from
`--description-file` when the server starts, so rewriting that file and starting again is "the
server changed its tool". With `--growable` it also has `grow`, which adds a tool of the given
name to this process's own list and sends `notifications/tools/list_changed`: the added tool
exists in that process only, so calling it tells which process (which session) answers.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

# A one-pixel PNG, and an SVG (a type Skillscope does not keep: it can carry script), as base64.
ONE_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
SVG_BASE64 = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="


def build(description: str, oauth_base: str = "", growable: bool = False) -> MCPServer:
    if oauth_base:
        from toy_oauth import ToyAuthorizationServer, auth_settings  # this script's folder

        server = MCPServer(
            "toy",
            log_level="WARNING",
            auth_server_provider=ToyAuthorizationServer(oauth_base),
            auth=auth_settings(oauth_base),
        )

        @server.tool(name="whoami", description="Name the client and resource of the token.")
        def whoami() -> str:
            from mcp.server.auth.middleware.auth_context import get_access_token

            token = get_access_token()
            if token is None:
                return "no token"
            return f"client={token.client_id} resource={token.resource}"
    else:
        server = MCPServer("toy", log_level="WARNING")

    @server.tool(name="echo", description=description)
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(
        name="touch_marker",
        description="Write a file named marker-LABEL in the working directory.",
        annotations=ToolAnnotations(destructive_hint=False),
    )
    def touch_marker(label: str, note: str = "") -> str:
        path = Path.cwd() / f"marker-{label}"
        path.write_text(f"called\n{note}")
        return f"wrote {path}"

    @server.tool(name="read_text", description="Answer with the text of a file (relative path).")
    def read_text(path: str) -> str:
        return (Path.cwd() / path).read_text(encoding="utf-8")

    @server.tool(
        name="report_env",
        description="Answer with the server's environment as JSON (also written to SAVE_AS in "
        "the working directory when given).",
    )
    def report_env(save_as: str = "") -> str:
        text = json.dumps(dict(os.environ), sort_keys=True)
        if save_as:
            (Path.cwd() / save_as).write_text(text)
        return text

    @server.tool(name="big", description="Answer with N letters x.")
    def big(n: int) -> str:
        return "x" * n

    @server.tool(name="hang", description="Wait SECONDS before answering.")
    async def hang(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "woke up"

    @server.tool(
        name="wait_marked",
        description="Write started-LABEL, wait SECONDS; if cancelled meanwhile, write "
        "cancelled-LABEL (in the working directory).",
    )
    async def wait_marked(label: str, seconds: float) -> str:
        (Path.cwd() / f"started-{label}").write_text("started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            (Path.cwd() / f"cancelled-{label}").write_text("cancelled")
            raise
        return "waited"

    @server.tool(name="crash", description="End the server's process at once, mid-call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(
        name="picture",
        description="Answer with a line of text, a one-pixel PNG, an SVG drawing and an "
        "embedded text resource (notes.md).",
    )
    def picture() -> list[object]:
        from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents

        return [
            TextContent(type="text", text="Here is the chart."),
            ImageContent(type="image", data=ONE_PIXEL_PNG, mime_type="image/png"),
            ImageContent(type="image", data=SVG_BASE64, mime_type="image/svg+xml"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///reports/notes.md",
                    mime_type="text/markdown",
                    text="# Notes\nThe chart shows one pixel.",
                ),
            ),
        ]

    @server.tool(name="broken", description="Always fails.")
    def broken() -> str:
        raise RuntimeError("the broken tool broke, as it always does")

    class Colour(BaseModel):
        colour: str = Field(description="A colour you like")

    class Login(BaseModel):
        password: str = Field(description="Your account's password")

    @server.tool(name="ask_colour", description="Ask the person for a colour, then say the answer.")
    async def ask_colour(ctx: Context) -> str:
        answer = await ctx.elicit("Which colour should the report use?", Colour)
        if answer.action == "accept":
            return f"elicitation answer: accept, colour {answer.data.colour}"
        return f"elicitation answer: {answer.action}"

    @server.tool(name="ask_password", description="Ask the person for a password (never answered).")
    async def ask_password(ctx: Context) -> str:
        answer = await ctx.elicit("Type your password to continue.", Login)
        return f"elicitation answer: {answer.action}"

    @server.prompt(name="brief", description="A short brief about a topic, in a tone.")
    def brief(topic: str, tone: str = "plain") -> str:
        with (Path.cwd() / "briefs-asked").open("a", encoding="utf-8") as asked:
            asked.write(f"{topic}\n")  # what the tests read on the server's side
        return f"Write a {tone} brief about {topic}, in three sentences."

    @server.prompt(name="quote_file", description="A prompt made of a file's text (any path).")
    def quote_file(path: str) -> str:
        return "Consider this text:\n" + (Path.cwd() / path).read_text(encoding="utf-8")

    if growable:

        @server.tool(name="grow", description="Add a tool NAME to this server's tool list.")
        async def grow(name: str, ctx: Context) -> str:
            def grown() -> str:
                return f"{name} answers"

            server.add_tool(grown, name=name, description="A tool added by grow.")
            await ctx.session.send_tool_list_changed()
            return f"added {name}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--description-file", default="")
    parser.add_argument("--oauth", action="store_true")
    parser.add_argument("--growable", action="store_true")
    args = parser.parse_args()
    description = "Repeat the text back."
    if args.description_file:
        description = Path(args.description_file).read_text(encoding="utf-8").strip()
    oauth_base = f"http://127.0.0.1:{args.port}" if args.oauth else ""
    server = build(description, oauth_base, args.growable)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
