from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("responses_api", "0020_vector_stores"),
    ]

    operations = [
        migrations.AddField(
            model_name="vectorstore",
            name="embedding_model",
            field=models.CharField(blank=True, default="", max_length=256),
        ),
    ]
