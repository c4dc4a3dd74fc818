"""The skill toolset framework (seed 004, `004_2e5891f4182e7f84.txt`), re-typed as the oracle.

Sections used: 2.1 (背景知识: the four calls, the workspace layout, `bash -lc`, skill files
read-only), 2.2 (深入 skill_run: `SkillRunTool._get_declaration`, `SkillRunInput`, the six
steps of `_run_async_impl` ending in `SkillRunOutput`, `_stage_skill`, the environment
variables) and "关键问题" (the `_inject_overview` instruction).

What the article leaves open, and the reading taken:
- `SkillRunInput.inputs` is a list of `WorkspaceInputSpec`, which the article never shows: the
  oracle gives it the fields Skillscope accepts (src, dst, mode).
- The "LLM sees" JSON of skill_run in "第一层" (with Chinese descriptions and a "...") is not
  what `_get_declaration` builds (`SkillRunInput.model_json_schema()`, no descriptions): the
  article contradicts itself, and its code is followed.
- `_inject_overview` is printed with two lines abbreviated by "..."; the text is taken as
  printed. The format of `{skill_instructions}` is not shown.
- `SkillRunOutput`'s field types are not shown, only the constructor call; the oracle checks
  its field names and order and types them loosely.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# 2.2 "它在框架里长什么样": FunctionDeclaration(name=..., description=...).
NAME = "skill_run"
DESCRIPTION = (
    "Run a command inside a skill workspace. "
    "Stages the entire skill directory and runs a single command."
)


# Not shown in the article (see the module docstring). No docstrings on the models: pydantic
# would make them schema descriptions, which the article's classes do not have.
class WorkspaceInputSpec(BaseModel):
    src: str
    dst: str = ""
    mode: str = "copy"


# 2.2 "LLM 调用时传入的参数，对应一个精心设计的输入模型".
class SkillRunInput(BaseModel):
    skill: str
    command: str
    cwd: str = ""
    env: dict[str, str] = {}
    output_files: list[str] = []
    timeout: int = 0
    inputs: list[WorkspaceInputSpec] = []
    save_as_artifacts: bool = False


# 2.2 第6步: `SkillRunOutput(stdout=..., ..., output_files=files).model_dump()`.
class SkillRunOutput(BaseModel):
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    duration_ms: int
    output_files: list[Any]


def declaration() -> dict[str, Any]:
    """skill_run as a tool of the request: name, description, the input model's schema."""
    return {
        "name": NAME,
        "description": DESCRIPTION,
        "input_schema": SkillRunInput.model_json_schema(),
    }


# 2.2 "自动注入的环境变量".
ENVIRONMENT = ("WORKSPACE_DIR", "SKILLS_DIR", "WORK_DIR", "OUTPUT_DIR", "RUN_DIR", "SKILL_NAME")
# 2.1 "bash -lc \"python3 scripts/xxx.py\" 在隔离目录中执行"; 2.2 第5步 "内部调用：bash -lc".
SHELL = ("bash", "-lc")
# 2.1 the workspace layout: skills/<name>/ read-only, its out/ and work/ links, runs/.
LINKS = {"out": "../../out", "work": "../../work"}


def inject_overview(skill_instructions: str) -> str:
    """ "关键问题" 第二层: the instruction `_inject_overview` adds to the system prompt."""
    instruction = f"""
Available skills:
{skill_instructions}
Tooling and workspace guidance:
- Skills run inside an isolated workspace...
- Prefer $SKILLS_DIR, $WORK_DIR, $OUTPUT_DIR... over hard-coded paths
- If a skill is not loaded, call skill_load
- When body and needed docs/tools are present, call skill_run or use tools directly
"""
    return instruction
