"""Django project package. Celery's app is ``config.celery`` (``celery -A
config`` finds it there); web processes never import it. They load Celery
only to queue a background response, at the first one
(``responses_api.background.run``); otherwise they queue no tasks."""
