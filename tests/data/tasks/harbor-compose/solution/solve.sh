#!/bin/bash
# Reference solution.
curl -s -X POST -d name=agent "$API_URL/register" > /app/ticket.txt
