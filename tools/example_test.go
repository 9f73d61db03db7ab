package tools_test

import (
	"context"
	"log"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/worker"
)

// A team that builds its own worker binary registers Go functions as tools; the
// bindings file (WOP_TOOLS or <packs>/tools.yaml) adds the others.
func Example_goFunctions() {
	type balanceArgs struct {
		AccountID string `json:"account_id"`
	}
	type balance struct {
		AccountID string `json:"account_id"`
		Balance   string `json:"balance"`
	}
	getBalance := func(ctx context.Context, args balanceArgs) (balance, error) {
		if args.AccountID != "ACC-12345" {
			return balance{}, tools.Fail("no account %s", args.AccountID) // the model reads it; no retry
		}
		return balance{AccountID: args.AccountID, Balance: "42.00"}, nil // the tool result, as JSON
	}

	set := tools.NewSet()
	if err := set.Add("get_balance", tools.Binding{Executor: tools.Typed(getBalance)}); err != nil {
		log.Fatal(err)
	}
	cfg, err := worker.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	cfg.Tools = set
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := worker.Run(context.Background(), c, cfg); err != nil {
		log.Fatal(err)
	}
}
