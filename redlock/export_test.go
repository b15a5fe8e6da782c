package redlock

// WithSameServerForTest lets a group's nodes share a server address, so the
// contract suite can build a group over clients of one backend (each node
// with its own key prefix). Tests only: real groups need independent
// deployments.
func WithSameServerForTest() Option {
	return func(c *config) error {
		c.sameServer = true
		return nil
	}
}
