package wire

import "time"

// ChallengeResponse is the 201 answer to POST /api/activities/{id}/challenge. The question is
// only in the image.
type ChallengeResponse struct {
	ChallengeID string    `json:"challenge_id"`
	Image       string    `json:"image"` // a data: URL of a PNG
	ExpiresAt   time.Time `json:"expires_at"`
}

// AnswerRequest is the body of POST /api/activities/{id}/challenge/answer.
type AnswerRequest struct {
	ChallengeID string `json:"challenge_id"`
	Answer      *int64 `json:"answer"`
}

// PassResponse is the 200 answer to a right answer: the hidden grab path, usable once.
type PassResponse struct {
	PathToken string    `json:"path_token"`
	GrabPath  string    `json:"grab_path"`
	ExpiresAt time.Time `json:"expires_at"`
}
