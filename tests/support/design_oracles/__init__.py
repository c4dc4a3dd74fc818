"""The source designs' own logic, re-typed from the articles, as the judges of each profile.

Each module holds one design, every function citing the article (in
`/work/shared/reference/seeds/`) and the section it comes from:

- `s05`: learn-claude-code s05 (seed 001), the `tool-result` profile;
- `toolset`: the skill toolset framework (seed 004), the `system-prompt` profile;
- `claude_code`: Claude Code's `Skill` meta-tool (seed 003), the `meta-message` profile.

The code follows the article's listings, not Skillscope's modules: a test feeds the same skill
folders to both and compares what the app sent (captured by the fake Anthropic server) byte for
byte. Where an article leaves something out, the module says so and says which reading it takes.
`table.py` lists every mechanism compared, and `tests/core/profiles/test_profiles_doc.py` writes it into
docs/profiles.md.
"""
