"""Listing a server's tools and prompts follows its cursors to the last page (MCP pagination)."""

from __future__ import annotations

from typing import Any

from mcp import types as mcp_types

from skills_app.core.mcp import connect

TOOL_PAGES = {
    None: (["first", "second"], "page-2"),
    "page-2": (["third"], "page-3"),
    "page-3": (["fourth"], None),
}
PROMPT_PAGES = {None: (["brief"], "more"), "more": (["summary"], None)}


class PagedSession:
    """What a server answers, one page per cursor; it records the cursors it was asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []

    async def list_tools(
        self, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListToolsResult:
        names, after = self._page("tools", TOOL_PAGES, params)
        tools = [mcp_types.Tool(name=n, input_schema={"type": "object"}) for n in names]
        return mcp_types.ListToolsResult(tools=tools, next_cursor=after)

    async def list_prompts(
        self, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListPromptsResult:
        names, after = self._page("prompts", PROMPT_PAGES, params)
        prompts = [mcp_types.Prompt(name=n) for n in names]
        return mcp_types.ListPromptsResult(prompts=prompts, next_cursor=after)

    def _page(self, kind: str, pages: dict[Any, Any], params: Any) -> tuple[list[str], str | None]:
        cursor = params.cursor if params is not None else None
        self.asked.append((kind, cursor))
        return pages[cursor]


async def test_every_page_of_tools_is_listed_in_order():
    session = PagedSession()
    tools = await connect._tools_of(session)
    assert [t.name for t in tools] == ["first", "second", "third", "fourth"]
    assert session.asked == [("tools", None), ("tools", "page-2"), ("tools", "page-3")]


async def test_every_page_of_prompts_is_listed_in_order():
    session = PagedSession()
    prompts = await connect._prompts_of(session)
    assert [p.name for p in prompts] == ["brief", "summary"]
    assert session.asked == [("prompts", None), ("prompts", "more")]
