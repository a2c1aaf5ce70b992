import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audits', '0003_sites_for_existing_audits'),
    ]

    operations = [
        migrations.AlterField(
            model_name='audit',
            name='site',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audits', to='audits.site'),
        ),
    ]
