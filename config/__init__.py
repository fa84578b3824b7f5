"""Django project package. Celery's app is ``config.celery`` (``celery -A
config`` finds it there); web processes never import it: they queue no
tasks, and Celery would add 10 MB to each of them."""
