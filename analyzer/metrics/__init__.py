"""The figures of a report and of a diff, computed from the runs, steps and findings."""
