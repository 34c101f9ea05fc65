// Command claim runs the metallb-iad claim controller.
package main

import (
	"os"

	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() { os.Exit(bootstrap.Main(claim.Controller)) }
