from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("responses_api", "0014_usage_response_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="servedmodel",
            name="kind",
            field=models.CharField(
                choices=[("generate", "Generates text"), ("embed", "Embeds text")],
                default="generate",
                max_length=10,
            ),
        ),
    ]
