package wire

import "time"

// AuditResponse is a page of the audit log, the newest first; Next is the before of the next
// page (0: none).
type AuditResponse struct {
	Entries []AuditEntryResponse `json:"entries"`
	Next    int64                `json:"next,omitempty"`
}

// AuditEntryResponse is one admin action (sale.AuditEntry).
type AuditEntryResponse struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Remote string    `json:"remote"`
	Status int       `json:"status"`
}
