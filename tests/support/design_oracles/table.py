"""The comparison table of docs/profiles.md: mechanism -> article -> Skillscope -> verdict.

Every row names the test that proves it (`proved_by`, "file::function"); `test_profiles_doc`
fails when such a test is missing, then writes the table into docs/profiles.md (or fails when
the file is stale). A verdict is one of:

- "exact": the app sends what the design's own code produces, byte for byte;
- "today's Claude Code": the meta-message profile follows current Claude Code over the article;
- "deliberate": a difference kept on purpose, with its reason;
- "article silent": the article does not give it; the reason says what Skillscope does.
"""

from __future__ import annotations

from dataclasses import dataclass

VERDICTS = ("exact", "today's Claude Code", "deliberate", "article silent")
S05 = "tests/core/profiles/test_design_tool_result.py"
TOOLSET = "tests/core/profiles/test_design_system_prompt.py"
CC = "tests/core/profiles/test_design_meta_message.py"
SEC = "tests/security/test_design_tools.py"
HOOKS = "tests/core/profiles/test_skill_call_hooks.py"


@dataclass(frozen=True)
class Row:
    profile: str
    mechanism: str
    article: str
    skillscope: str
    verdict: str
    reason: str
    proved_by: str


ROWS: tuple[Row, ...] = (
    # -- tool-result: learn-claude-code s05 (seed 001) -------------------------------------
    Row(
        "tool-result",
        "System prompt: base line, load_skill line, `Skills available:` catalog",
        "001 §5 `SYSTEM`, `get_descriptions`",
        "`s05_loader.get_descriptions`, `ToolResultProfile.system`",
        "exact",
        'One string; `  - name: description [tags]`, "No description", "(no skills available)".',
        f"{S05}::test_the_request_is_the_designs_system_tools_and_options",
    ),
    Row(
        "tool-result",
        "Catalog order",
        '001 §5 `_load_all`: `sorted(rglob("SKILL.md"))`',
        "`s05_loader.load_skills` (sorted `skills/<folder>/SKILL.md` paths)",
        "exact",
        "Over the workspace's `skills/`, the design's `WORKDIR/skills`.",
        f"{S05}::test_load_skill_returns_what_the_designs_get_content_returns",
    ),
    Row(
        "tool-result",
        "Frontmatter reader",
        "001 §5 `_parse_frontmatter` (regex, `key: value` lines)",
        "`s05_loader.parse_frontmatter` (only this profile, only in design mode)",
        "exact",
        "Quotes and `>`/`|` kept, continuation lines dropped, nested `tags:` read, a BOM "
        "hides the frontmatter, CRLF read as LF (`read_text`).",
        f"{S05}::test_load_skill_returns_what_the_designs_get_content_returns",
    ),
    Row(
        "tool-result",
        "Skill names",
        '001 §5 `meta.get("name", f.parent.name)`, a dict',
        "`s05_loader.load_skills`",
        "exact",
        "Quoted names keep their quotes; a later skill of the same name replaces an earlier "
        "one in its place.",
        f"{S05}::test_load_skill_returns_what_the_designs_get_content_returns",
    ),
    Row(
        "tool-result",
        "`load_skill` result",
        "001 §5 `get_content`",
        "`ToolResultProfile._design_load`, `s05_loader.wrap`",
        "exact",
        '`<skill name="NAME">\\n{body}\\n</skill>`, the body not stripped (issue #30; the '
        "article elides the return), no `is_error` on an unknown name.",
        f"{S05}::test_load_skill_returns_what_the_designs_get_content_returns",
    ),
    Row(
        "tool-result",
        "Tool set and schemas",
        "001 §5 `TOOLS` (load_skill), `TOOL_HANDLERS`; the other four schemas: the repository file",
        "`s05_tools.DESIGN_TOOLS` + `LOAD_SKILL_TOOL`",
        "exact",
        "bash, read_file, write_file, edit_file, load_skill, in that order.",
        f"{S05}::test_the_request_is_the_designs_system_tools_and_options",
    ),
    Row(
        "tool-result",
        "max_tokens, thinking, caching",
        "001 §5 `agent_loop`: `max_tokens=8000`, no thinking, no cache",
        "`ToolResultProfile.design`, `compose_request`",
        "exact",
        "8000; no `thinking`, `output_config` or `cache_control`.",
        f"{S05}::test_the_request_is_the_designs_system_tools_and_options",
    ),
    Row(
        "tool-result",
        "Tool results of bash, read_file, write_file, edit_file",
        "the repository file's handlers (001 shows the dispatch map only)",
        "`s05_tools` over `Workspace` and the sandboxed `BashTool`",
        "exact",
        'stdout then stderr stripped, "(no output)", the blocked-word list, `... (N more)`, '
        '"Wrote N bytes", "Edited PATH", Python\'s errno text; never `is_error`.',
        f"{S05}::test_the_designs_tools_answer_as_its_handlers_do",
    ),
    Row(
        "tool-result",
        "A path outside the workspace",
        '`safe_path`: "Error: Path escapes workspace: P"',
        "the Read/Write/Edit default rules, then `Workspace`",
        "deliberate",
        'The rules refuse a path outside the workspace before any tool runs ("Permission '
        "denied: ...\", an error result); the design's text remains for a link leading out.",
        f"{SEC}::test_the_designs_tools_stay_in_the_workspace",
    ),
    Row(
        "tool-result",
        "Approvals and rules",
        "none in the design",
        "`tool_calls._permission_call`: bash as `Bash`, read_file as `Read`...",
        "deliberate",
        "Loading asks no one (as the design); commands and writes keep Skillscope's rules and "
        "default approval; deny wins, a bare deny removes the tool.",
        f"{SEC}::test_the_rules_decide_the_designs_tools_as_skillscopes",
    ),
    Row(
        "tool-result",
        "An unknown tool or a malformed call",
        "`Unknown tool: NAME`; a missing key raises (`Error: 'command'`)",
        "`tool_calls`, `tools.inputs.check_input`",
        "deliberate",
        "Skillscope's error names the available tools or the wrong field: the model can act on it.",
        f"{SEC}::test_a_bare_deny_removes_the_designs_tool_it_stands_for",
    ),
    Row(
        "tool-result",
        "`/name` typed by the user",
        "001 §4 figure 2: the model recognises it and calls the skill tool",
        "`slash_invokes`: the text goes to the model as typed",
        "exact",
        "No server-side invocation and no made-up tool call; the model calls load_skill.",
        f"{S05}::test_a_slash_command_reaches_the_model_as_typed",
    ),
    Row(
        "tool-result",
        "Messages",
        '001 §5 `history.append({"role": "user", "content": query})`',
        "stored rows as content blocks",
        "deliberate",
        "A user's text goes as one text block where the design sends a string: the API reads "
        "both the same.",
        f"{S05}::test_a_slash_command_reaches_the_model_as_typed",
    ),
    Row(
        "tool-result",
        "Which skills",
        "every SKILL.md under `WORKDIR/skills`",
        "the skills offered to the conversation",
        "deliberate",
        "The registry, the conversation's filter and deny rules decide; a skill whose author "
        "set `disable-model-invocation` stays out of the model's reach in every mode.",
        f"{S05}::test_the_request_is_the_designs_system_tools_and_options",
    ),
    Row(
        "tool-result",
        "Nested and plugin folders",
        "`rglob` over the source tree, named by the parent folder",
        "staged flat as `skills/<command name>` (plugin `a:b` as `a__b`)",
        "deliberate",
        "Skills come from several sources; the loader reads them where the workspace has them.",
        f"{S05}::test_nested_folders_are_read_where_skillscope_stages_them",
    ),
    Row(
        "tool-result",
        "A skill's model, allowed-tools, effort, hooks, fork",
        "not in the design",
        "`DesignTraits.skill_context=False`",
        "exact",
        "None applies in design mode (all apply under the same base prompt).",
        f"{S05}::test_skillscope_additions_are_left_out",
    ),
    # -- system-prompt: the skill toolset (seed 004) ----------------------------------------
    Row(
        "system-prompt",
        "`skill_run` declaration",
        "004 §2.2 `_get_declaration`, `SkillRunInput`",
        "`skill_run.SKILL_RUN_DESIGN_TOOL`",
        "exact",
        "`SkillRunInput.model_json_schema()` key for key; `WorkspaceInputSpec` is not shown "
        '(src, dst, mode); the article\'s other rendering ("LLM sees", with Chinese '
        "descriptions) contradicts its code, which is followed.",
        f"{TOOLSET}::test_the_request_is_the_designs_overview_skill_run_and_options",
    ),
    Row(
        "system-prompt",
        "Overview in the system prompt",
        "004 关键问题 第二层 `_inject_overview`",
        "`system_prompt.design_overview`",
        "exact",
        'As printed, including the two lines the article abbreviates with "...".',
        f"{TOOLSET}::test_the_request_is_the_designs_overview_skill_run_and_options",
    ),
    Row(
        "system-prompt",
        "Skill lines, loaded bodies, documents, the other six tools",
        '004: "name + description", `_merge_into_system`, `_build_docs_text`: not shown',
        "`skill_lines`, `<loaded_skill>`, `<skill_document>`, `TOOLSET`",
        "article silent",
        "Skillscope's forms.",
        f"{TOOLSET}::test_skill_load_asks_no_one_and_applies_no_claude_code_context",
    ),
    Row(
        "system-prompt",
        "Thinking, caching, max_tokens",
        "004: not shown",
        "`SystemPromptProfile.design`",
        "article silent",
        "No thinking, effort or cache markers (the system prompt as one string); max_tokens "
        "is the configured one.",
        f"{TOOLSET}::test_the_request_is_the_designs_overview_skill_run_and_options",
    ),
    Row(
        "system-prompt",
        "`skill_run` execution",
        "004 §2.1, §2.2: staged read-only, out/ and work/ links, six variables, `bash -lc`",
        "`skill_run.run_skill_command` in the sandbox",
        "exact",
        "No load needed first, no approval unless a rule asks, stdout as written.",
        f"{TOOLSET}::test_skill_run_runs_as_the_design_runs_it",
    ),
    Row(
        "system-prompt",
        "`skill_run` result",
        "004 §2.2 第6步 `SkillRunOutput`",
        "`run_skill_command`",
        "exact",
        "stdout, stderr, exit_code, timed_out, duration_ms, output_files; no `artifact_files` "
        "(an `output_files_note` only when Skillscope's bounded walk stops early).",
        f"{TOOLSET}::test_skill_run_runs_as_the_design_runs_it",
    ),
    Row(
        "system-prompt",
        "Run folder",
        "004 §2.1 `runs/ ← 执行记录`, `$RUN_DIR`",
        "`runs/run-<id>/record.json`",
        "article silent",
        "The record's form is not shown: Skillscope writes the command, its folder and result.",
        f"{TOOLSET}::test_skill_run_runs_as_the_design_runs_it",
    ),
    Row(
        "system-prompt",
        "Rules on `skill_run`",
        "none in the design",
        "decided as `Bash(command)` with the design's bare allow",
        "deliberate",
        "Deny and ask rules still win (security is not dropped).",
        f"{TOOLSET}::test_the_rules_still_decide_skill_run_commands",
    ),
    Row(
        "system-prompt",
        "State lifetime",
        "004 §11 `state_delta` (临时状态)",
        "`system_prompt.lifetime`",
        "exact",
        "One turn, whatever `SKILL_STATE_LIFETIME` says.",
        f"{TOOLSET}::test_loaded_state_lasts_for_the_turn_as_in_the_design",
    ),
    Row(
        "system-prompt",
        "The agent's own tools",
        '004 模式一: "Agent 自带的基础工具（write_to_file、read_file 等）", not defined',
        "Skillscope's Read/Write/Edit/Glob/Grep/Bash and their rules",
        "article silent",
        "Kept, with the default approvals of ordinary tools.",
        f"{TOOLSET}::test_skill_load_asks_no_one_and_applies_no_claude_code_context",
    ),
    Row(
        "system-prompt",
        "`/name`, a skill's model and allowed-tools",
        "not in the design",
        "`DesignTraits(slash=False, skill_context=False)`",
        "exact",
        "The text goes to the model as typed; no model switch or pre-approval.",
        f"{TOOLSET}::test_a_slash_command_reaches_the_model_as_typed",
    ),
    # -- meta-message: Claude Code's Skill tool (seed 003) -----------------------------------
    Row(
        "meta-message",
        "System prompt (as the source design)",
        '003 Phase 4: "You are Claude Code, Anthropic\'s official CLI..."',
        "`meta_message.CLAUDE_CODE_PROMPT`",
        "today's Claude Code",
        "The article prints the first words; the sentence ends as today's Claude Code's does.",
        f"{CC}::test_the_catalog_is_the_articles_filter_and_format_skill",
    ),
    Row(
        "meta-message",
        "Catalog budget",
        '003: "a token budget limit of 15,000 characters by default"',
        "`AgentConfig.catalog_budget`, `SKILL_CATALOG_BUDGET`",
        "exact",
        "15,000 characters by default; every name listed, long descriptions cut first.",
        f"{CC}::test_the_catalog_budget_is_the_articles_default",
    ),
    Row(
        "meta-message",
        "Who is listed",
        "003 Phase 2 `getSkillsForSkillTool`",
        "`catalog.listed`",
        "exact",
        "Model-invocable, with a description or when_to_use.",
        f"{CC}::test_the_catalog_is_the_articles_filter_and_format_skill",
    ),
    Row(
        "meta-message",
        "Catalog lines",
        '003 `formatSkill`, `loadPluginSkills` ("(plugin:NAME)")',
        "`catalog.build_catalog`",
        "exact",
        "Except a literal block's line breaks, collapsed (deliberate: one line per entry); a "
        "skill without description: its body's first paragraph (today's Claude Code).",
        f"{CC}::test_the_catalog_is_the_articles_filter_and_format_skill",
    ),
    Row(
        "meta-message",
        "Tool description wording",
        "003 `fN2` (its tags lost in the stored copy)",
        "`catalog.CATALOG_INTRO`",
        "deliberate",
        "Skillscope's own words around the article's `<available_skills>` list.",
        f"{CC}::test_the_catalog_is_the_articles_filter_and_format_skill",
    ),
    Row(
        "meta-message",
        "Tool input",
        "003 `inputSchema: { command }`",
        "`{skill, args}`; `command` accepted",
        "today's Claude Code",
        "Arguments need a field; a call in the article's form still works.",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "Acknowledgement",
        "003 `outputSchema {success, commandName}`",
        "tool_result text `Launching skill: NAME`",
        "today's Claude Code",
        "The article shows the tool's data; what the API gets is text.",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "Visible metadata message",
        "003 \"Skills Object Design\": `[statusMessage, skillName, args].join('\\n')`",
        "`transcript.status_message_text`",
        "exact",
        "Tags restored from DESIGN.md (the stored article lost them).",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "Hidden message",
        '003 "with the base directory path prepended" (its PDF example puts it last)',
        "`Base directory for this skill: DIR`, a blank line, the body",
        "today's Claude Code",
        "The article contradicts itself; the prepended reading, with today's wording.",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "`command_permissions` message",
        "003 Phase 4 shows it among the messages sent",
        "stored (`kind=permissions`, `to_model=False`), never sent",
        "today's Claude Code",
        "Its content is an object, which the Messages API refuses; the context change is "
        "applied instead.",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "Execution context",
        "003 Phase 3 `contextModifier`: allowed tools, model",
        "`invocation.SkillInvoker._apply`",
        "exact",
        "For the rest of the turn, in every mode (it is the design's own).",
        f"{CC}::test_invoking_follows_todays_claude_code_where_the_article_differs",
    ),
    Row(
        "meta-message",
        "Validation",
        "003 Phase 3 step 1 `validateInput`",
        "`skilltool.validate_invocation`",
        "exact",
        "Empty, unknown, model invocation disabled; the leading `/` dropped.",
        f"{CC}::test_the_oracles_validation_matches_the_profiles_refusals",
    ),
    # -- every profile ---------------------------------------------------------------------
    Row(
        "all",
        "PostToolUse hook input",
        "000 §3 `run_post_tool_hooks(call, result)`",
        "`skillcalls.SkillCalls.call`",
        "exact",
        "The real result, also load_skill's body on its hidden row (hooks are trusted "
        "server-side code).",
        f"{HOOKS}::test_post_tool_use_gets_load_skills_real_result_with_the_body",
    ),
)
