package main

import (
	"context"
	"errors"
	"time"

	"seckill/internal/sale"
)

// demoID names the demo activity.
const demoID = "demo"

// seedDemo creates the demo activity (stock 100, on sale from now for 30 days) unless it exists.
func seedDemo(ctx context.Context, svc *sale.Service) error {
	if _, err := svc.Activity(ctx, demoID); !errors.Is(err, sale.ErrNotFound) {
		return err
	}
	now := time.Now()
	_, err := svc.CreateActivity(ctx, sale.Activity{
		ID: demoID, Name: "Demo flash sale", Kind: sale.KindItem, Stock: 100, PriceCents: 999,
		PerUserLimit: 1, StartAt: now, EndAt: now.Add(30 * 24 * time.Hour), PayWindow: 15 * time.Minute,
		Admission: sale.AdmitDirect,
	})
	if errors.Is(err, sale.ErrExists) {
		return nil // another node, starting at the same time, seeded it
	}
	return err
}
