"""History events in graveler: storing batches (writer.py, recorder.py), reading and following
them (reading.py), and dropping hours past retention (retention.py). The layout is shared,
silt/history_events/layout.py."""
