"""Console forms, a module per group of pages: they parse what a person typed
into the values the services take. The domain rules (names taken, ranges, who
may do what) live in the services, whose
:class:`~django.core.exceptions.ValidationError` the views put back on the
form, field by field (:func:`.common.errors_onto`)."""
