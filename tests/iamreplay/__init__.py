"""IAM replay: every AWS call the controller makes in the AWS and integration tests, judged against the IAM
policies the stacks synthesize (IRSA and Pod Identity). See ``recorder.py``."""
