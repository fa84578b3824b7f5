"""Celery application: backend health checks, usage draining, retention purges."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
