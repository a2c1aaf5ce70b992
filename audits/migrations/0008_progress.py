# The index behind the audit page's live speed (pages written in the last 30 seconds).
# After 0007_external_unchecked, which another change added on 0006_triage at the same
# time: one line of migrations, not two leaves.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audits', '0007_external_unchecked'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='page',
            index=models.Index(fields=['audit', 'crawled_at'], name='page_audit_crawled'),
        ),
    ]
