"""Camera and stereo perception of the manip stack: depth, point clouds, object clustering."""
