// Placeholder (issue #5): replaced by its implementation.
