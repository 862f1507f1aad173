package httpapi

// StageOf is stageOf, for the tests.
var StageOf = stageOf
