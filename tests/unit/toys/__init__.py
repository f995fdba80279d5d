"""A toy format and a toy detector, written as a newcomer would add them to losslens: the
architecture tests register them in memory, and copy them into a copy of the project."""
