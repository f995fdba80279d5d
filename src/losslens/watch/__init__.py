"""Follow a growing log (tail -F semantics) and turn the detectors' findings into alert events.

``follower``: the lines appended to a file or arriving on stdin, through rotation and
truncation. ``watcher``: lines in, debounced events out, on a bounded window of records.
``session``: what can be followed, and ``follow``, the events of each analysis while it is.
"""

from losslens.watch.follower import Follower, Splitter, complete_lines, lines_from
from losslens.watch.session import Verdict, follow, followable
from losslens.watch.watcher import Active, Event, Watcher

__all__ = ["Active", "Event", "Follower", "Splitter", "Verdict", "Watcher", "complete_lines", "follow",
           "followable", "lines_from"]
