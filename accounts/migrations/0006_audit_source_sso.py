from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_admin_api_keys'),
    ]

    operations = [
        migrations.AlterField(
            model_name='auditentry',
            name='source',
            field=models.CharField(choices=[('console', 'Console'), ('api', 'REST API'), ('cli', 'Command line'), ('oidc', 'Single sign-on')], default='console', max_length=16),
        ),
    ]
