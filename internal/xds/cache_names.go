package xds

// shareNames replaces each of names that the cache holds resources of
// (type typ) by the cache's string for it, equal but shared by every
// stream that names it. The cache's owner's lock is held.
func (c *resourceCache) shareNames(typ int, names []string) {
	byName := c.byName[typ]
	for i, n := range names {
		if set := byName[n]; set != nil {
			names[i] = set.name
		}
	}
}
