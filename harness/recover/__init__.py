"""Recovery of a crash image, as a real machine would do it after power
loss: first the file system's own recovery (journal replay), then the
extraction of the database files so the SUT's recovery can run on them."""
