"""Drop the index each per-audit table had on audit_id alone.

Every one of these tables has a unique key or index that leads with audit_id, so
the foreign key's own index served no query and cost one more index write per
row: per link edge (~90 a page), issue, page and frontier row.

Done as a plain DROP INDEX rather than Django's AlterField, which on SQLite
rebuilds the whole table (a copy of every edge of every audit kept).
"""

import django.db.models.deletion
from django.db import migrations, models

TABLES = {
    "chunklease": "chunks",
    "frontierurl": "frontier",
    "issue": "issues",
    "linkedge": "links",
    "page": "pages",
}


def drop_lone_audit_indexes(apps, schema_editor):
    for name in TABLES:
        model = apps.get_model("audits", name)
        with schema_editor.connection.cursor() as cursor:
            constraints = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
        for index, info in constraints.items():
            if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == ["audit_id"]:
                schema_editor.execute(schema_editor._delete_index_sql(model, index))


def restore_lone_audit_indexes(apps, schema_editor):
    for name in TABLES:
        model = apps.get_model("audits", name)
        field = model._meta.get_field("audit")
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):

    dependencies = [
        ("audits", "0005_link_edges_indexed_by_target_after_the_crawl"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_lone_audit_indexes, restore_lone_audit_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name=name,
                    name="audit",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name=related, to="audits.audit"),
                )
                for name, related in TABLES.items()
            ],
        ),
    ]
