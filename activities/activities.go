package activities

// Activities carries the dependencies of every activity of the host. Its exported
// methods are the activities; register the instance with worker.RegisterActivity.
type Activities struct{}
