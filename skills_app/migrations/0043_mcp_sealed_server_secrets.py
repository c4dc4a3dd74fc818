"""MCP servers' env and header values encrypted at rest (`models.sealed.SealedValuesField`).

The rows are encrypted while the fields are still plain JSON in the migration state, then the
fields become sealed ones (the column stays JSON: the keys as they were, each value ciphertext).
Backwards, the fields become plain again and the values are decrypted.
"""

from django.db import migrations

import skills_app.models.sealed
from skills_app.models.sealed import open_values, seal_values


def seal_existing(apps, schema_editor):
    McpServer = apps.get_model("skills_app", "McpServer")
    for server in McpServer.objects.all():
        server.env = seal_values(server.env or {})
        server.headers = seal_values(server.headers or {})
        server.save(update_fields=["env", "headers"])


def open_existing(apps, schema_editor):
    McpServer = apps.get_model("skills_app", "McpServer")
    for server in McpServer.objects.all():
        server.env = open_values(server.env or {})
        server.headers = open_values(server.headers or {})
        server.save(update_fields=["env", "headers"])


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0042_mcp_oauth"),
    ]

    operations = [
        migrations.RunPython(seal_existing, open_existing),
        migrations.AlterField(
            model_name="mcpserver",
            name="env",
            field=skills_app.models.sealed.SealedValuesField(blank=True, default=dict),
        ),
        migrations.AlterField(
            model_name="mcpserver",
            name="headers",
            field=skills_app.models.sealed.SealedValuesField(blank=True, default=dict),
        ),
    ]
