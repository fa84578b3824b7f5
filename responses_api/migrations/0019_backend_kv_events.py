from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("responses_api", "0018_files"),
    ]

    operations = [
        migrations.AddField(
            model_name="backend",
            name="kv_events_endpoint",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.AddField(
            model_name="backend",
            name="tokenizer_path",
            field=models.CharField(blank=True, default="", max_length=500),
        ),
    ]
