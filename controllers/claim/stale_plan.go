package claim
