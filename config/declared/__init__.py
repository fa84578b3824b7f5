"""Every environment variable Switchyard reads, declared once: ``spec``
says what a declaration holds, one module per area declares them,
``environment`` reads them, ``reference`` writes the documentation."""
