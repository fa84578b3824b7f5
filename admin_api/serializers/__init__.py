"""The management API's request and response shapes, one serializer per
resource; ``manage.py apply`` validates its file's entries with the same ones."""
