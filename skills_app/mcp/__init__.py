"""MCP servers inside the rules: registration, reviewed tool definitions, the tools a person gets.

See docs/mcp.md. The client itself is plain Python in `skills_app/core/mcp/`.
"""
