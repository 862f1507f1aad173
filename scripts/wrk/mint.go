//go:build ignore

// mint writes n user tokens (users u0..u{n-1}), one per line, for wrk's grab.lua.
//
//	go run scripts/wrk/mint.go -secret S -n 400000 > tokens.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"seckill/internal/auth"
)

func main() {
	secret := flag.String("secret", "", "the server's SECKILL_JWT_SECRET")
	n := flag.Int("n", 400_000, "tokens to mint")
	prefix := flag.String("prefix", "u", "user id prefix")
	flag.Parse()
	tk, err := auth.New([]byte(*secret), time.Now)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	now := time.Now()
	for i := range *n {
		tok, err := tk.Mint(fmt.Sprint(*prefix, i), now, 6*time.Hour)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintln(w, tok)
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
}
